# denoiser — build, demo, tests, benchmarks.
# Everything here needs only Go; the Kafka integration tests use a real
# Apache Kafka when KAFKA_BROKERS is set (.ci/run installs and starts one
# with scripts/kafka.sh) and an embedded broker otherwise.

GO      ?= go
# amd64 at its baseline: Go then never fuses x*y + z into one instruction,
# so scores are the same bits as the golden files' (online/kernels.go).
export GOAMD64 = v1
BIN     := bin/denoiser
LAB     := bin/denoiser-lab
OUT     ?= out
# The CPU profile both binaries and make bench are built with (make pgo).
PGO     := cmd/denoiser/default.pgo

.PHONY: build demo test test-short bench bench-all bench-instructions bench-river pgo fuzz kafka-start kafka-stop clean eval probe check-monitoring

# Two binaries: the service (run, replay, snapshot) and the lab (demo,
# eval, gen, convert), so that the service links neither plotting nor the
# embedded broker. The service is built with profile-guided optimisation
# from cmd/denoiser/default.pgo, which go build picks up by itself (make
# pgo regenerates it; docs/perf.md, "Profile-guided optimisation"); the
# lab, which runs the same model in eval and the same pipeline in demo,
# with the same profile.
build:
	$(GO) build -buildvcs=auto -o $(BIN) ./cmd/denoiser
	$(GO) build -buildvcs=auto -pgo=$(PGO) -o $(LAB) ./cmd/denoiser-lab

# The main job on the embedded default: the stream service against an
# embedded Kafka broker (no Java, no network): the shipped synthetic log is
# produced into a topic, scored by `denoiser run`'s pipeline as a consumer
# group member, read back from the scored topic and reported.
demo: build
	@mkdir -p $(OUT)
	$(LAB) demo --in testdata/synthetic-20k.jsonl --report $(OUT)/report.json

# Reproduce the paper's experiments on ML-100k (docs/results/: Markdown
# reports, PNG figures, JSON numbers); see README.md, "Evaluation", for its
# running time. DATA is MovieLens 100K's u.data, which is not shipped:
# make eval DATA=path/to/ml-100k/u.data
# On the random split recommend runs GMF only (--backbone neumf there
# takes about 4 minutes: README.md, "Evaluation"); the DeCA split runs both.
# DECA, if set, is the DeCA paper's split of it (the directory holding
# ml-100k.train.rating; github.com/wangyu-ustc/DeCA, data/ml-100k/): RQ1 on
# that split goes to $(RESULTS)/deca (about 5 minutes on 2 cores; all of
# make eval about 9).
DATA    ?=
DECA    ?=
# Reports go to out/results unless RESULTS says otherwise, so that a run
# never overwrites the committed docs/results by accident; refresh those
# with make eval DATA=... RESULTS=docs/results.
RESULTS ?= out/results
eval: build
	@test -n "$(DATA)" || { echo "make eval needs DATA=path/to/ml-100k/u.data: download ml-100k.zip from https://grouplens.org/datasets/movielens/100k/ and unzip it"; exit 2; }
	$(LAB) eval transition --data $(DATA) --out $(RESULTS) --report $(RESULTS)/transition.json
	$(LAB) eval recommend --backbone gmf --weight product --data $(DATA) --out $(RESULTS) --report $(RESULTS)/recommend.json
	mkdir -p $(RESULTS)/weight
	$(LAB) eval recommend --backbone gmf --weight weight --seeds 8 --ablations=false --data $(DATA) --out $(RESULTS)/weight --report $(RESULTS)/weight/recommend.json
	$(LAB) gen --profile v2 --events 100000 --seed 11 --out $(OUT)/rq1-v2.jsonl
	mkdir -p $(RESULTS)/log
	$(LAB) eval recommend --in $(OUT)/rq1-v2.jsonl --backbone gmf --weight weight --oracle --seeds 6 --ablations=false --out $(RESULTS)/log --report $(RESULTS)/log/recommend.json
	$(LAB) eval sensitivity --data $(DATA) --out $(RESULTS) --report $(RESULTS)/sensitivity.json
	$(LAB) eval detect --data $(DATA) $(if $(DECA),--deca $(DECA)) --out $(RESULTS) --report $(RESULTS)/detect.json
	mkdir -p $(RESULTS)/batch
	$(LAB) eval detect --dwell-shares 0 --seeds 4 --passes 2 --out $(RESULTS)/batch --report $(RESULTS)/batch/detect.json
	$(LAB) eval partitions --data $(DATA) --seeds 4 --out $(RESULTS) --report $(RESULTS)/partitions.json
	$(MAKE) probe RESULTS=$(RESULTS)
	@if [ -n "$(DECA)" ]; then \
		mkdir -p $(RESULTS)/deca && \
		$(LAB) eval recommend --split deca --weight product --data $(DECA) --seeds 5 --out $(RESULTS)/deca --report $(RESULTS)/deca/recommend.json; \
	else echo "DECA not set: RQ1 on the DeCA split skipped (make eval DATA=... DECA=path/to/deca-ml-100k)"; fi

# The weight against the label-free baselines on streams of a second
# generator, written apart from the model (scripts/probe_generator.py;
# docs/design/model.md, "Found at stop 69"): B with dwell on 30 % of the
# events, C without dwell or types, D with the noise dwelling longer, F
# with event types and no dwell ("The gap on the event type's path (stop
# 72)"); and
# T, this project's v1 stream with genuine clicks in bursts
# (scripts/genuine_bursts.py; "Bursts (stop 70)"); and Q, uniform
# misclicks on a third generator (scripts/quick_clicks.py; "The noisy head
# trains the embeddings (stop 71)"); and P, C with double taps (a noise
# click on the same item 0.3-2 s after a third of the genuine ones:
# scripts/burst_variants.py; "Found at stop 73, not built"). A report and
# the replay's summary each in $(RESULTS)/probe (about 35 s).
PROBE_B = --events 100000 --users 15000 --items 8000 --noise 0.20 --dwell-share 0.3 --seed 102
PROBE_C = --events 100000 --users 15000 --items 8000 --noise 0.20 --dwell-share 0 --no-types --seed 103
PROBE_D = --events 150000 --users 30000 --items 20000 --noise 0.35 --dwell-share 1 --idle --seed 104
PROBE_F = --events 120000 --users 20000 --items 15000 --noise 0.30 --dwell-share 0 --mix adj=0.7,bait=0.1,bot=0.1,nuser=0.1 --seed 106
PROBE_Q = --events 200000 --users 20000 --items 10000 --noise 0.1 --nq 0 --gq 0 --seed 14
probe: build
	@if ! command -v python3 >/dev/null 2>&1; then echo "python3 not found: make probe skipped"; exit 0; fi; \
	mkdir -p $(RESULTS)/probe $(OUT) && \
	$(foreach p,B C D F,echo "probe $(p): $(PROBE_$(p))" && \
		python3 scripts/probe_generator.py --out $(OUT)/probe-$(p).jsonl $(PROBE_$(p)) >/dev/null && \
		$(BIN) replay --in $(OUT)/probe-$(p).jsonl --out /dev/null --truth field \
			--report $(RESULTS)/probe/$(p).json 2>$(RESULTS)/probe/$(p).txt && \
		grep -E '^  (weight|p_clean) |best baseline' $(RESULTS)/probe/$(p).txt && ) \
	echo "probe T: gen --profile v1 --events 200000 --seed 7, a sixth of its genuine clicks re-timed into bursts, stripped" && \
	$(LAB) gen --profile v1 --events 200000 --seed 7 --out $(OUT)/probe-v1.jsonl >/dev/null 2>&1 && \
	python3 scripts/genuine_bursts.py --in $(OUT)/probe-v1.jsonl --out $(OUT)/probe-T.jsonl --strip && \
	$(BIN) replay --in $(OUT)/probe-T.jsonl --out /dev/null --truth field \
		--report $(RESULTS)/probe/T.json 2>$(RESULTS)/probe/T.txt && \
	grep -E '^  (weight|p_clean) |best baseline|^bursts' $(RESULTS)/probe/T.txt && \
	echo "probe Q: scripts/quick_clicks.py $(PROBE_Q)" && \
	python3 scripts/quick_clicks.py --out $(OUT)/probe-Q.jsonl $(PROBE_Q) >/dev/null && \
	$(BIN) replay --in $(OUT)/probe-Q.jsonl --out /dev/null --truth field \
		--report $(RESULTS)/probe/Q.json 2>$(RESULTS)/probe/Q.txt && \
	grep -E '^  (weight|p_clean) |best baseline' $(RESULTS)/probe/Q.txt && \
	echo "probe P: probe C with double taps (scripts/burst_variants.py --kind taps --share 0.3)" && \
	python3 scripts/burst_variants.py --in $(OUT)/probe-C.jsonl --out $(OUT)/probe-P.jsonl --kind taps --share 0.3 && \
	$(BIN) replay --in $(OUT)/probe-P.jsonl --out /dev/null --truth field \
		--report $(RESULTS)/probe/P.json 2>$(RESULTS)/probe/P.txt && \
	grep -E '^  (weight|p_clean) |best baseline|^bursts' $(RESULTS)/probe/P.txt

# The whole suite, bounded fuzzing included; the alert rules too when
# promtool is installed (Debian: apt-get install prometheus; .ci/run does).
PROMTOOL ?= promtool
test:
	$(GO) vet ./...
	$(GO) test -count=1 -timeout 30m ./...
	$(MAKE) fuzz FUZZTIME=20000x
	@if command -v $(PROMTOOL) >/dev/null 2>&1; then $(MAKE) check-monitoring; \
	else echo "$(PROMTOOL) not found: check-monitoring skipped"; fi

# The Prometheus alert rules (docs/monitoring): syntax and their unit tests.
# That the dashboard and the rules query only exported metrics is checked
# by go test ./service (TestMonitoringMatchesMetrics).
check-monitoring:
	$(PROMTOOL) check rules docs/monitoring/alerts.yml
	$(PROMTOOL) test rules docs/monitoring/alerts_test.yml

test-short:
	$(GO) test -short -count=1 ./...

# The hot path's benchmarks (about a minute), then the ratio of each
# figure to its baseline in the same run (docs/perf.md): the RGBT model's
# step against the plain model's, and the pipeline (consumer group ->
# model -> scored topic, on KAFKA_BROKERS or the embedded broker) against
# a kafka-go pass-through. BENCHFLAGS=-count=5 repeats each benchmark and
# takes the ratio of the medians. bench-all runs every benchmark of the
# module (about 8 minutes: 1M-user snapshots and checkpoints).
BENCH_RATIOS := \
	-ratio 'step, RGBT over plain, events per CPU-second: BenchmarkStep/rgbt events/cpu-s / BenchmarkStep/plain events/cpu-s' \
	-ratio 'step, RGBT over plain, events per second: BenchmarkStep/rgbt events/s / BenchmarkStep/plain events/s' \
	-ratio 'pipeline over pass-through, events per second: BenchmarkPipeline denoiser-events/s / BenchmarkPipeline passthrough-events/s' \
	-ratio 'pipeline over pass-through, events per CPU-second: BenchmarkPipeline passthrough-cpu-µs/event / BenchmarkPipeline denoiser-cpu-µs/event'
# The benchmarks are built with the service's profile (PGO), as the
# binary is.
BENCHFLAGS ?=
bench:
	$(GO) test -pgo=$(PGO) -run '^$$' -bench '^Benchmark(Step|Pipeline|Decode|AppendScored|Run)$$' -benchmem -timeout 30m $(BENCHFLAGS) \
		./online ./service ./consumer ./producer 2>&1 | $(GO) run ./internal/benchratio $(BENCH_RATIOS)

bench-all:
	$(GO) test -run '^$$' -bench . -benchmem -timeout 30m ./...

# Instructions per event of `denoiser replay` under valgrind's callgrind
# (scripts/bench-instructions.sh; about a minute, valgrind needed): a
# figure other load on the machine does not move, for comparing commits
# (docs/perf.md).
bench-instructions: build
	scripts/bench-instructions.sh $(BIN)

# denoiser replay against River's BiasedMF (Python) on the same stream
# (scripts/bench_river.py; installs River into $(OUT)/river-venv the first
# time; a few minutes). Not part of make test.
bench-river: build
	python3 scripts/bench_river.py --denoiser $(BIN) --lab $(LAB) --work $(OUT)/bench-river --venv $(OUT)/river-venv

# Regenerate cmd/denoiser/default.pgo, the CPU profile the service is
# built with (scripts/pgo-profile.sh: the replay of the shipped log, the
# model's step and the pipeline; about half a minute). Commit the result.
pgo:
	GO=$(GO) scripts/pgo-profile.sh

# Every decoder, FUZZTIME each: make fuzz FUZZTIME=10m, or a count of
# executions, FUZZTIME=20000x. make test runs a count (about 10 s each):
# a duration races Go's fuzz coordinator at its deadline on a busy machine
# and fails with a bare "context deadline exceeded" and no failing input
# (golang/go#75804, fixed in Go 1.27; seen in CI on go1.26.8). Minimising a new input is bounded by FUZZMINIMIZETIME: Go's
# default, 60s, lets the minimiser of a model-sized input (each try
# snapshots the coverage of gonum too) eat a short run whole, leaving it
# at a few dozen executions.
FUZZTIME ?= 1m
FUZZMINIMIZETIME ?= 1s
FUZZERS := consumer:FuzzDecode online:FuzzReadModel online:FuzzReadModelDeltas snapshot:FuzzRead internal/movielens:FuzzRead
fuzz:
	@set -e; for f in $(FUZZERS); do \
		echo "fuzz $${f%%:*} $${f##*:} for $(FUZZTIME)"; \
		$(GO) test -run '^$$' -fuzz "^$${f##*:}$$" -fuzztime $(FUZZTIME) -fuzzminimizetime $(FUZZMINIMIZETIME) -timeout 0 ./$${f%%:*}; \
	done

kafka-start:
	scripts/kafka.sh install
	scripts/kafka.sh start

kafka-stop:
	scripts/kafka.sh stop

clean:
	rm -rf bin $(OUT)
