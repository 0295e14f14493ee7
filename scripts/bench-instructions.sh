#!/usr/bin/env bash
# Instructions per event of `denoiser replay`, counted by valgrind's
# callgrind: a figure that other load on the machine cannot move
# (docs/perf.md). Used by `make bench-instructions`.
#
#   scripts/bench-instructions.sh [BIN]
#
# BIN is the denoiser binary (default bin/denoiser). Environment:
#   LOG          the event log (default testdata/synthetic-20k.jsonl)
#   EVENTS       N (default 10000): the log's first N events and first 2N
#                events are replayed; the figure is the difference of the
#                two counts divided by N, so that start-up (runtime, config,
#                model allocation, opening files) and the end (flush, report,
#                exit) cancel and what is left is events N+1..2N, each on a
#                model past its warm-up
#   OUT          where the logs, outputs and callgrind files go
#                (default out/bench-instructions; callgrind_annotate reads them)
#   COMMIT       the commit to name in the output (default: the binary's, else HEAD)
#   REPLAY_ARGS  more arguments for every replay, e.g. "--config /abs/my.yaml"
#                (replay runs in OUT: give paths absolute)
#
# Two configurations are measured: the default one, and the plain model
# (--set model.plain=true). replay always steps a plain model beside the
# main one (its loss_baseline), so the first is RGBT + plain and the second
# plain + plain, and their difference is what RGBT costs over the plain
# model.
#
# What makes the count repeatable:
#   - GODEBUG=asyncpreemptoff=1: the signals of Go's asynchronous
#     preemption crash programs under valgrind;
#   - GOMAXPROCS=1: with more Ps, idle threads spin looking for work, as
#     long as the (serialised, slowed) scheduling lets them; with 2 Ps and
#     the collector on, two runs differed by 4.5%;
#   - GOGC=off: a replay allocates little (2-3 collections in a 20,000-event
#     replay) but when a collection starts and how much a concurrent mark
#     scans depends on timing; with GOMAXPROCS=1 but the collector on, two
#     runs differed by 1%. Allocation itself is still counted (mallocgc);
#     allocations are measured by the benchmarks' allocs/op;
#   - the truth field is removed from the log: with it, the report sorts
#     every score at the end (ROC-AUC), n log n work that is not per event;
#   - replay runs in OUT on inputs named events-1n/2n.jsonl: each scored
#     record carries its source's name, so the path's length is per-event
#     work (16 instructions a character).
# What is left is Go's map hash seed, random per process: map probes, a few
# tens of instructions per event (docs/perf.md has the spread).
set -euo pipefail

bin=${1:-bin/denoiser}
log=${LOG:-testdata/synthetic-20k.jsonl}
n=${EVENTS:-10000}
out=${OUT:-out/bench-instructions}
read -r -a extra <<<"${REPLAY_ARGS:-}"

command -v valgrind >/dev/null || { echo "bench-instructions: valgrind not found (Debian: apt-get install valgrind)" >&2; exit 2; }
[[ -x $bin ]] || { echo "bench-instructions: $bin not found: make build" >&2; exit 2; }
bin=$(cd "$(dirname "$bin")" && pwd)/$(basename "$bin")
have=$(wc -l <"$log")
((have >= 2 * n)) || { echo "bench-instructions: $log has $have events, fewer than 2×EVENTS = $((2 * n))" >&2; exit 2; }

mkdir -p "$out"
# sed quits after 2×EVENTS lines itself: `| head` would end it with
# SIGPIPE, which pipefail turns into a silent exit 141.
sed -e 's/,"truth":"[a-z]*"//' -e "$((2 * n))q" "$log" >"$out/events-2n.jsonl"
if grep -q '"truth"' "$out/events-2n.jsonl"; then
	echo "bench-instructions: could not remove the truth field from $log" >&2
	exit 2
fi
head -n "$n" "$out/events-2n.jsonl" >"$out/events-1n.jsonl"

# count CONFIG SIZE [ARGS...]: the instructions of one replay.
count() {
	local config=$1 size=$2
	shift 2
	# In $out, with names of one length: every scored record carries its
	# source (the input's name), so a longer path costs more per event.
	(
		cd "$out"
		GODEBUG=asyncpreemptoff=1 GOMAXPROCS=1 GOGC=off \
			valgrind --tool=callgrind --callgrind-out-file="callgrind.$config.$size.out" \
			"$bin" replay --in "events-$size.jsonl" --out "scored.$config.$size.jsonl" "${extra[@]}" "$@" \
			>"replay.$config.$size.log" 2>&1 ||
			{ tail -20 "replay.$config.$size.log" >&2; exit 1; }
		awk '$1 == "totals:" || $1 == "summary:" { print $2; exit }' "callgrind.$config.$size.out"
	)
}

# packages FILE: the self instructions of FILE by Go package, "package count"
# per line (the package is the function's name up to the first dot after
# its last slash, generic shapes and receivers left out).
packages() {
	callgrind_annotate --auto=no --threshold=100 "$1" | awk '
	/^ *[0-9,]+ \( *[0-9.]+%\) / && !/PROGRAM TOTALS/ {
		n = $1; gsub(",", "", n)
		line = $0
		sub(/^ *[0-9,]+ \( *[0-9.]+%\) +/, "", line)
		sub(/ \[[^]]*\]$/, "", line)
		head = substr(line, index(line, ":") + 1)
		if ((i = index(head, "(")) > 0) head = substr(head, 1, i - 1)
		if ((i = index(head, "[")) > 0) head = substr(head, 1, i - 1)
		pre = ""
		while ((i = index(head, "/")) > 0) { pre = pre substr(head, 1, i); head = substr(head, i + 1) }
		sum[(i = index(head, ".")) > 0 ? pre substr(head, 1, i - 1) : "(other)"] += n
	}
	END { for (p in sum) print p, sum[p] }'
}

# The commit: COMMIT, else what the binary says (make build stamps it when
# the checkout lets Go read it), else this checkout's HEAD.
commit=${COMMIT:-$("$bin" version 2>/dev/null | awk '{ print $2 }')}
if [[ -z $commit || $commit == unknown ]]; then
	commit="$(git rev-parse --short HEAD 2>/dev/null || echo unknown) (this checkout's HEAD)"
	if [[ -n $(git status --porcelain --untracked-files=no 2>/dev/null) ]]; then
		commit="$commit with uncommitted changes"
	fi
fi
echo "instructions per event: denoiser replay of $log without its truth field,"
echo "events $((n + 1))..$((2 * n)) (replay of $((2 * n)) events minus replay of $n, over $n); commit $commit"
echo "cd $out; GODEBUG=asyncpreemptoff=1 GOMAXPROCS=1 GOGC=off valgrind --tool=callgrind $bin replay --in events-{1n,2n}.jsonl ${REPLAY_ARGS:-}"
printf '%-8s %16s %16s %12s\n' config "$n events" "$((2 * n)) events" "per event"
declare -A per
for config in default plain; do
	args=()
	[[ $config == plain ]] && args=(--set model.plain=true)
	small=$(count "$config" 1n "${args[@]}")
	large=$(count "$config" 2n "${args[@]}")
	per[$config]=$(((large - small) / n))
	printf '%-8s %16d %16d %12d\n' "$config" "$small" "$large" "${per[$config]}"
done
echo "default: RGBT model + plain shadow + pipeline; plain: plain model + plain shadow + pipeline"
echo "RGBT over the plain model: $((per[default] - per[plain])) per event; default/plain = $(awk -v a="${per[default]}" -v b="${per[plain]}" 'BEGIN { printf "%.3f", a / b }')"

echo
echo "per event by Go package (self instructions, events $((n + 1))..$((2 * n)); the largest 12 in the default configuration):"
printf '%-40s %10s %10s\n' package default plain
for config in default plain; do
	packages "$out/callgrind.$config.1n.out" | sed "s/^/$config -1 /"
	packages "$out/callgrind.$config.2n.out" | sed "s/^/$config 1 /"
done | awk -v n="$n" '
	{ per[$3, $1] += $2 * $4; pkgs[$3] = 1 }
	END { for (p in pkgs) printf "%s %.0f %.0f\n", p, per[p, "default"] / n, per[p, "plain"] / n }' |
	sort -k2,2nr | head -12 | awk '{ printf "%-40s %10d %10d\n", $1, $2, $3 }'
